package dev.fenced.demo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.web.server.ResponseStatusException;

final class InvoiceControllerTest {

    @Test
    void rangeIsInclusive() {
        assertThat(InvoiceController.ids(new SettleRequest(null, 3L, 5L))).containsExactly(3L, 4L, 5L);
    }

    @Test
    void idsAreTakenAsGiven() {
        assertThat(InvoiceController.ids(new SettleRequest(List.of(7L, 2L), null, null))).containsExactly(7L, 2L);
    }

    @Test
    void rejectsAmbiguousEmptyRepeatedOrOversizedRequests() {
        assertBadRequest(new SettleRequest(List.of(1L), 1L, 2L), "Give either ids or from/to, not both");
        assertBadRequest(new SettleRequest(List.of(), null, null), "ids must hold 1 to 10000 invoice ids");
        assertBadRequest(new SettleRequest(List.of(4L, 4L), null, null), "ids must not repeat an id");
        assertBadRequest(new SettleRequest(List.of(4L, -1L), null, null), "An invoice id is a positive number, not -1");
        assertBadRequest(new SettleRequest(null, 1L, null), "Give ids, or both from and to");
        assertBadRequest(new SettleRequest(null, 1L, 10_001L), "from..to must be ascending and span at most 10000 ids");
    }

    private static void assertBadRequest(SettleRequest request, String reason) {
        assertThatThrownBy(() -> InvoiceController.ids(request))
                .isInstanceOfSatisfying(ResponseStatusException.class, e -> {
                    assertThat(e.getStatusCode().value()).isEqualTo(400);
                    assertThat(e.getReason()).isEqualTo(reason);
                });
    }
}
