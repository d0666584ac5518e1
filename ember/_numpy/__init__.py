"""The implementation of ember.numpy, split by concern; ember.numpy re-exports its public names. Its modules import
only modules listed before them in ORDER["_numpy"] of tests/test_layers.py (promotion, shape, ufuncs, creation, ...,
methods), at the top of the file: no import inside a function."""
