/*
 * output.h
 *    The result rows of a clustering function (output.c).
 */
#ifndef GPUCLUST_OUTPUT_H
#define GPUCLUST_OUTPUT_H

#include "gpuclust.h"

extern int	gc_output_mem_guc;	/* kB */

/* Defines gpuclust.output_mem. */
extern void GcOutputDefineGucs(void);

extern Tuplestorestate *GcCallOutputStart(GcCall *call, FunctionCallInfo fcinfo,
										  TupleDesc *tupdesc, int64 nrows);

#endif							/* GPUCLUST_OUTPUT_H */
