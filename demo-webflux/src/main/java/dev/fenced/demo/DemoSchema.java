package dev.fenced.demo;

import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.stereotype.Component;

/**
 * Creates the schema (invoices, the scheduled job's {@code job_reports}) and seeds invoices {@code 1..fenced.demo.seed-invoices} (default 20) at start-up, before the
 * application reports ready. Runs on the main thread, where waiting is allowed.
 */
@Component
class DemoSchema implements ApplicationRunner {

    private static final Logger LOG = LoggerFactory.getLogger(DemoSchema.class);

    private final InvoiceRepository invoices;
    private final JobReports jobReports;
    private final int seedInvoices;

    DemoSchema(InvoiceRepository invoices, JobReports jobReports,
            @Value("${fenced.demo.seed-invoices:20}") int seedInvoices) {
        this.invoices = invoices;
        this.jobReports = jobReports;
        this.seedInvoices = seedInvoices;
    }

    @Override
    public void run(ApplicationArguments args) {
        invoices.createAndSeed(seedInvoices).then(jobReports.create()).block(Duration.ofSeconds(60));
        LOG.info("Schema ready; invoices 1..{} seeded (existing rows are kept)", seedInvoices);
    }
}
