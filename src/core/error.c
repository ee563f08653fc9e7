/*
 * util.c
 *    Small helpers shared by the CPU algorithms.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"

/* Writes a printf-style message into errbuf and returns status. */
gc_status
gc_fail(char *errbuf, gc_status status, const char *fmt,...)
{
	va_list		ap;

	if (errbuf)
	{
		va_start(ap, fmt);
		vsnprintf(errbuf, GC_ERRBUF_SIZE, fmt, ap);
		va_end(ap);
	}
	return status;
}
