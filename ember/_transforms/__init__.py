"""Layer 4, transforms: IR -> IR interpreters driven by the primitives' rules (reverse mode in ad, forward mode in
jvp, batching) and the clean-up passes (DCE, CSE, known/unknown splitting)."""
from ember._transforms.ad import backward_pass, value_and_grad_ir, vjp_ir
from ember._transforms.batching import batch_ir, batch_pass
from ember._transforms.jvp import jvp_ir, jvp_pass
from ember._transforms.passes import cse, dce, simplify, split_known

__all__ = ["backward_pass", "batch_ir", "batch_pass", "cse", "dce", "jvp_ir", "jvp_pass", "simplify",
           "split_known", "value_and_grad_ir", "vjp_ir"]
