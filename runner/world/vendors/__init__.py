"""One module per vendor, generated in ``ORDER`` because later vendors read what earlier ones published."""
