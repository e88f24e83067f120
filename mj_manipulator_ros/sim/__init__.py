"""MuJoCo simulation: scene composition, the physics owner and simulated controllers."""
