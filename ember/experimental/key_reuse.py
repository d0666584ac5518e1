"""ember.experimental.key_reuse (jax.experimental.key_reuse): the key-reuse checker, turned on by the
debug_key_reuse option (`ember.config.update("jax_debug_key_reuse", True)`, or `with ember.debug_key_reuse(True):`).

With it on, a typed PRNG key (ember.random.key, split, fold_in, wrap_key_data) consumed twice (split, random bits,
any sampler) raises ember.errors.KeyReuseError: eagerly (each key array remembers whether it was consumed), and
when a jitted function, a branch or a loop body is staged (its IR is checked: ember._transforms.key_reuse).
fold_in and key_data do not consume a key; clone gives a fresh one; raw uint32 keys (PRNGKey) are never checked,
as in JAX. JAX's module has no public names; neither has ember's. See docs/random.md."""

__all__: list[str] = []
