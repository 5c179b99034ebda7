"""The IR and the contracts every layer shares: graph, operator definitions, parameters,
kernel specs, the symbol JSON writer. Knows no operator library, array, device or compiler."""
