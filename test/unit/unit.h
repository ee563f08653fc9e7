/*
 * unit.h
 *    A minimal check harness for the core unit tests: CHECK counts and
 *    reports failures, UNIT_DONE prints "N passed, N failed" and sets the
 *    exit status.
 */
#ifndef GPUCLUST_UNIT_H
#define GPUCLUST_UNIT_H

#include <stdio.h>

static int	unit_passed = 0;
static int	unit_failed = 0;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			unit_passed++; \
		else \
		{ \
			unit_failed++; \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

#define UNIT_DONE() \
	do { \
		printf("%s: %d passed, %d failed\n", __FILE__, unit_passed, unit_failed); \
		return unit_failed ? 1 : 0; \
	} while (0)

#endif
