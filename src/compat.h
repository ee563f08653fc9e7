/*
 * compat.h
 *    The differences between the PostgreSQL versions gpuclust builds
 *    against, in one place.  Tested: 15, 16, 17 and 18.
 */
#ifndef GPUCLUST_COMPAT_H
#define GPUCLUST_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
/* Before 15 a GUC prefix could only be warned about, not reserved. */
#include "utils/guc.h"
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* SPI_execute_plan_extended, with a DestReceiver for the rows, came in 14. */
#if PG_VERSION_NUM >= 140000
#define GC_HAVE_SPI_EXECUTE_EXTENDED 1
#endif

#endif							/* GPUCLUST_COMPAT_H */
