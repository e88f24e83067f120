"""Hardware-in-the-loop bring-up tooling."""
