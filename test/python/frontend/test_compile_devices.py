"""The target a compile picks from its tensors' devices: several devices, a tensor
created on another one, or a target other than the tensors' are errors naming them."""
from __future__ import annotations

import pytest
import torch

from compile_options import compiled, f_pointwise
from fusegrad.devices import DeviceError, select_target

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_tensors_on_several_devices_raise_naming_them():
    """No silent copies and no eager fallback: the error names a tensor per device."""
    def f(x, y):
        return x.sin(), y.cos()
    with pytest.raises(DeviceError, match=r"several devices \(L_x_ on cpu, L_y_ on meta\)"):
        compiled(f)(torch.randn(3), torch.randn(3, device="meta"))


def test_tensors_created_on_another_device_raise_naming_the_op():
    def f(x):
        return x.sin(), torch.zeros_like(x, device="meta")
    with pytest.raises(DeviceError, match=r"several devices \(L_x_ on cpu, the result of "
                                          r"aten.full_like.default on meta\)"):
        compiled(f)(torch.randn(3))


def test_target_must_match_the_tensors():
    with pytest.raises(DeviceError, match=r"target='cuda', but L_x_ is on cpu; move the model "
                                          r"and its inputs to cuda"):
        compiled(f_pointwise, target="cuda")(torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(ValueError, match="target='tpu' is not one of"):
        compiled(f_pointwise, target="tpu")


def test_select_target():
    cpu, meta = torch.ones(1), torch.ones(1, device="meta")
    assert select_target(None, [("a", cpu)]) == "cpu"
    assert select_target("cpu", []) == "cpu"
    with pytest.raises(DeviceError, match="a is on meta; fusegrad compiles for cpu and cuda"):
        select_target(None, [("a", meta)])
