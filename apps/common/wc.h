/*
 * wc.h — apps/common, the library every wharf executable links: configuration sources
 * (ps_config.h), the Fashion-MNIST reader (wc_data.h) and the models (wc_model.h).
 *
 * Call chain: apps/psd, apps/train, apps/ctl main() -> wc_* ; nothing below apps calls in here.
 */
#ifndef WHARF_WC_H
#define WHARF_WC_H

#include "ps_core/ps_config.h"
#include "apps/common/wc_data.h"
#include "apps/common/wc_model.h"

#endif
