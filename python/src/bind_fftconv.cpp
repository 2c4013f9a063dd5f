#include "arrays.hpp"
// placeholder until the fftconv family lands
void bind_fftconv(nb::module_&) {}
