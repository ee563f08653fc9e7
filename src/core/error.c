/*
 * error.c
 *    What every algorithm of the CPU core needs besides its arithmetic: the
 *    cancel question, the out-of-memory error, debug output and the clock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core.h"

/* Asks the cancel callback; on yes sets the "canceled" error and returns 1. */
int
gc_core_cancelled(gc_core_ctx *ctx)
{
	if (ctx->cancel == NULL || !ctx->cancel(ctx->cancel_arg))
		return 0;
	gc_core_cancel_status(ctx);
	return 1;
}

/* Sets the "canceled" error and returns GC_ERR_CANCELLED. */
gc_status
gc_core_cancel_status(gc_core_ctx *ctx)
{
	return gc_error_set(ctx->err, GC_ERR_CANCELLED, "canceled");
}

/* Sets an out-of-memory error (bytes: what was asked for) and returns GC_ERR_OUT_OF_MEMORY. */
gc_status
gc_core_oom(gc_core_ctx *ctx, size_t bytes, const char *fmt,...)
{
	va_list		ap;

	gc_error_clear(ctx->err);
	va_start(ap, fmt);
	gc_error_vformat(ctx->err->message, fmt, ap);
	va_end(ap);
	ctx->timing->bytes_needed = bytes > (size_t) INT64_MAX ? INT64_MAX : (int64_t) bytes;
	return GC_ERR_OUT_OF_MEMORY;
}

/* Prints a line to stderr when the caller's tuning asks for debug output. */
void
gc_core_debug(const gc_core_ctx *ctx, const char *fmt,...)
{
	va_list		ap;

	if (!ctx->tuning->debug)
		return;
	fputs("gpuclust cpu: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Milliseconds of wall clock (C11 timespec_get), for the timing record. */
double
gc_core_now_ms(void)
{
	struct timespec ts;

	timespec_get(&ts, TIME_UTC);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}
