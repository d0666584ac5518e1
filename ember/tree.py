"""ember.tree: the short names of ember.tree_util, as jax.tree (note unflatten(treedef, leaves))."""
from ember._core.pytree import static as static
from ember._core.pytree import tree_transpose as transpose, tree_unflatten as unflatten
from ember._core.user_pytree import tree_all as all  # noqa: A004
from ember._core.user_pytree import tree_flatten as flatten, tree_flatten_with_path as flatten_with_path
from ember._core.user_pytree import tree_leaves as leaves, tree_leaves_with_path as leaves_with_path
from ember._core.user_pytree import tree_map as map  # noqa: A004
from ember._core.user_pytree import tree_map_with_path as map_with_path, tree_reduce as reduce
from ember._core.user_pytree import tree_structure as structure
from ember._core.user_pytree import tree_broadcast as broadcast, tree_reduce_associative as reduce_associative

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map", "map_with_path",
           "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]
