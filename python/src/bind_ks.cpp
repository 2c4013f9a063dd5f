#include "arrays.hpp"
// placeholder until the ks family lands
void bind_ks(nb::module_&) {}
