"""Image operators (MXNet's ``_image_*``, ``nd.image``/``sym.image``): HWC layout conversions,
flips, crops, resizes and colour transforms, and their random forms."""
