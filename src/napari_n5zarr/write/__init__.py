"""Writing: export as plan -> write -> publish; pyramid downsampling; block writes."""
