"""Work orders (beta): docs/work-orders.md."""
