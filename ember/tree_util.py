"""ember.tree_util: pytrees (nested tuples, lists, dicts, namedtuples and None, plus registered node types)."""
from ember._core.pytree import (PyTreeDef as PyTreeDef, register_pytree_node as register_pytree_node,
                                tree_flatten as tree_flatten, tree_leaves as tree_leaves, tree_map as tree_map,
                                tree_structure as tree_structure, tree_unflatten as tree_unflatten)

__all__ = ["PyTreeDef", "register_pytree_node", "tree_flatten", "tree_leaves", "tree_map", "tree_structure",
           "tree_unflatten"]
