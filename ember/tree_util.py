"""ember.tree_util: pytrees (nested tuples, lists, dicts, namedtuples and None, plus registered node types), as
jax.tree_util."""
from ember._core.pytree import DictKey as DictKey, FlattenedIndexKey as FlattenedIndexKey, GetAttrKey as GetAttrKey
from ember._core.pytree import KeyEntry as KeyEntry, KeyPath as KeyPath, Partial as Partial, PyTreeDef as PyTreeDef
from ember._core.pytree import SequenceKey as SequenceKey, keystr as keystr
from ember._core.pytree import register_dataclass as register_dataclass
from ember._core.pytree import register_pytree_node as register_pytree_node
from ember._core.pytree import register_pytree_node_class as register_pytree_node_class
from ember._core.pytree import register_pytree_with_keys as register_pytree_with_keys
from ember._core.pytree import register_pytree_with_keys_class as register_pytree_with_keys_class
from ember._core.pytree import register_static as register_static
from ember._core.pytree import treedef_tuple as treedef_tuple
from ember._core.pytree import tree_transpose as tree_transpose
from ember._core.pytree import tree_unflatten as tree_unflatten, treedef_children as treedef_children
from ember._core.pytree import treedef_is_leaf as treedef_is_leaf
# (typed key arrays are leaves of these, as in JAX: ember._core.user_pytree)
from ember._core.user_pytree import all_leaves as all_leaves, tree_all as tree_all, tree_flatten as tree_flatten
from ember._core.user_pytree import tree_flatten_with_path as tree_flatten_with_path, tree_leaves as tree_leaves
from ember._core.user_pytree import tree_leaves_with_path as tree_leaves_with_path, tree_map as tree_map
from ember._core.user_pytree import tree_map_with_path as tree_map_with_path, tree_reduce as tree_reduce
from ember._core.user_pytree import tree_structure as tree_structure
from ember._core.user_pytree import default_registry as default_registry, flatten_one_level as flatten_one_level
from ember._core.user_pytree import flatten_one_level_with_keys as flatten_one_level_with_keys
from ember._core.user_pytree import is_tree_node as is_tree_node, tree_broadcast as tree_broadcast
from ember._core.user_pytree import tree_reduce_associative as tree_reduce_associative

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial", "PyTreeDef", "SequenceKey",
    "all_leaves", "default_registry", "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "keystr",
    "register_dataclass", "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_static", "treedef_tuple", "tree_all", "tree_broadcast",
    "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path",
    "tree_reduce", "tree_reduce_associative", "tree_structure", "tree_transpose", "tree_unflatten",
    "treedef_children", "treedef_is_leaf",
]
