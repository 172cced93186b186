"""Figures: pure functions from a view's state and its data to one drawing (SVG, or one raster image for a big grid).
They know nothing of widgets: the views show them, the static copies and exports write them."""
