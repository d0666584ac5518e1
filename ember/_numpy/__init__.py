"""The implementation of ember.numpy, split by concern; ember.numpy re-exports its public names."""
