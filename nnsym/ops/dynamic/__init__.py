"""Value-shaped operators (``OpDef.value_shaped``): their output shapes depend on input values
(boolean_mask, the DGL graph samplers). Each runs as a storage kernel on the host that sizes its
outputs from the values; ``nd`` calls run them, bound graphs refuse them."""
