"""Convert: existing containers -> new pyramids (whole or a region), or made dual in place."""
