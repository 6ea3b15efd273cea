package dev.fenced.demo;

/** No invoice has the requested id; mapped to 404. */
final class InvoiceNotFoundException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final long id;

    InvoiceNotFoundException(long id) {
        super("No invoice with id " + id);
        this.id = id;
    }

    long id() {
        return id;
    }
}
