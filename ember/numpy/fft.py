"""ember.numpy.fft: numpy.fft (and jax.numpy.fft) on ember arrays, lowered to StableHLO's fft (see
ember._numpy.fft and the `fft` primitive of ember._prims.fft). Every function differentiates and batches."""
from ember._numpy.fft import FFT_NAMES as _FFT_NAMES
from ember._numpy.fft import (fft as fft, ifft as ifft, rfft as rfft, irfft as irfft, hfft as hfft, ihfft as ihfft,
                              fft2 as fft2, ifft2 as ifft2, rfft2 as rfft2, irfft2 as irfft2, fftn as fftn,
                              ifftn as ifftn, rfftn as rfftn, irfftn as irfftn, fftfreq as fftfreq,
                              rfftfreq as rfftfreq, fftshift as fftshift, ifftshift as ifftshift)

__all__ = list(_FFT_NAMES)
