"""Export: an array or layer -> a new pyramid that is N5 and Zarr v3 at once (plan -> write -> publish)."""
