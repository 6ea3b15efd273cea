package dev.fenced.lock.internal.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.fenced.lock.internal.redis.RedisConnections.ServerInfo;
import org.junit.jupiter.api.Test;

class ServerChecksTest {

    @Test
    void readsVersionAndRoleFromInfo() {
        ServerInfo info = ServerInfo.parse("# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n\n# Replication\r\nrole:slave\r\n");

        assertThat(info.version()).isEqualTo("7.0.15");
        assertThat(info.role()).isEqualTo("slave");
        assertThat(info.atLeast(7)).isTrue();
        assertThat(info.atLeast(8)).isFalse();
    }

    @Test
    void unknownOrOddVersionsAreNotAssumedNew() {
        assertThat(ServerInfo.parse(null)).isEqualTo(ServerInfo.UNKNOWN);
        assertThat(ServerInfo.UNKNOWN.atLeast(7)).isFalse();
        assertThat(new ServerInfo("6.2.6", "master").atLeast(7)).isFalse();
        assertThat(new ServerInfo("unstable", "master").atLeast(7)).isFalse();
        assertThat(new ServerInfo("8", "master").atLeast(7)).isTrue();
    }

    @Test
    void onlyNoevictionOrNoMemoryLimitKeepsKeys() {
        assertThat(ServerChecks.evicts("noeviction", "1gb")).isFalse();
        assertThat(ServerChecks.evicts("allkeys-lru", "0")).isFalse();
        assertThat(ServerChecks.evicts("volatile-lru", "1073741824")).isTrue();
        assertThat(ServerChecks.evicts("allkeys-lfu", "1073741824")).isTrue();
    }
}
