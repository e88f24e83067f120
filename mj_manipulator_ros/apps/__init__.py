"""Programs built from the floors below: the demo and the execution node's entry point."""
