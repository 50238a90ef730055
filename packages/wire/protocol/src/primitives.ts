import { z } from 'zod'
import { CURSOR_MAX_LENGTH, idFault, PARAM_MAX_LENGTH } from './limits.js'

// Building blocks of the wire shapes. Response fields are checked for their
// type; request values (path segments and query parameters, which arrive as
// decoded strings) also for their bounds, with messages a caller can act on.

/** A non-negative safe integer (a count, an offset, an epoch in ms). */
export const nonNegativeInt = z.number().int().nonnegative()

const jsonCheck = z.json()

/**
 * A JSON value (event data, a projection view), checked as `z.json()` checks
 * it but passed on as it is, never rebuilt: `z.json()`'s output assigns each
 * member to a new object, which drops an own `__proto__` key (legal JSON, kept
 * by the store and by `JSON.parse`) and copies the whole value.
 */
export const jsonValue = z.custom<z.infer<typeof jsonCheck>>((value) => jsonCheck.safeParse(value).success, {
  error: 'is not a JSON value',
})

/** A session id in an answer: any non-empty string. */
export const sessionId = z.string().min(1)

/** A session id addressed by path or query: one that can name a session (`idFault`). */
export const idParam = z.string().check((ctx) => {
  const fault = idFault(ctx.value)
  if (fault !== undefined) ctx.issues.push({ code: 'custom', message: fault, input: ctx.value })
})

/** A free-text query parameter (a cwd). */
export const textParam = z.string().max(PARAM_MAX_LENGTH, { error: `is longer than ${PARAM_MAX_LENGTH} characters` })

/** A page cursor, as the previous page gave it. */
export const cursorParam = z.string().max(CURSOR_MAX_LENGTH, { error: `is longer than ${CURSOR_MAX_LENGTH} characters` })

/**
 * A decimal integer query parameter within `[min, max]`: digits only (no sign,
 * exponent, fraction or hex), read as a number.
 */
export function intParam(min: number, max: number) {
  const error = `must be an integer from ${min} to ${max}`
  return z.string().transform((text, ctx) => {
    const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      ctx.issues.push({ code: 'custom', message: `${error}, got "${preview(text)}"`, input: text })
      return z.NEVER
    }
    return n
  })
}

/** One of `values`. */
export function choiceParam<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, {
    error: (issue) => `must be one of ${values.map((v) => `"${v}"`).join(', ')}, got "${preview(String(issue.input))}"`,
  })
}

/** Long values are cut in messages so an error never echoes a huge input. */
export function preview(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text
}
