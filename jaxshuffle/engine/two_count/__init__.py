"""The two-count engine: ``pair`` (the dominating two-count pairs) -> ``plan`` (static shapes) ->
``divergence`` (the certified hockey-stick divergence in O(window)) -> ``search`` (the certified epsilon
bracket with implicit gradients). docs/math.md sections 2-6."""
