import type { JsonValue } from '@dsh/session'
import { z } from 'zod'
import { SubagentError } from './errors.js'

/**
 * Compiles a descriptor's `outputSchema` (a JSON Schema document) into a
 * validator. A schema zod cannot read is `SUBAGENT_INVALID_DESCRIPTOR`:
 * checked at spawn, before the child exists.
 */
export function compileOutputSchema(schema: Readonly<Record<string, JsonValue>>): z.ZodType {
  try {
    return z.fromJSONSchema(schema as z.core.JSONSchema.JSONSchema)
  } catch (error) {
    throw new SubagentError(
      'SUBAGENT_INVALID_DESCRIPTOR',
      `outputSchema is not a JSON Schema this runtime can validate with (${error instanceof Error ? error.message : String(error)}); simplify it or drop it.`,
      {
        cause: error,
      },
    )
  }
}

/**
 * The JSON inside a final message: the whole text, or the one fenced
 * ```json block it consists of (a fence line, the JSON, a fence line). One
 * pass over the text, whatever it holds: a model's final message is
 * untrusted, and a backtracking pattern over a long run of blank lines
 * would hold the event loop for minutes.
 */
export function jsonText(text: string): string {
  const body = text.trim()
  if (body.length < 6 || !body.startsWith('```') || !body.endsWith('```')) return text
  let inner = body.slice(3, -3)
  if (inner.startsWith('json')) inner = inner.slice(4)
  const start = inner.search(/\S/)
  const end = inner.trimEnd().length
  // Only whitespace between the fences is no JSON either way.
  if (start < 0) return text
  // Each fence stands on a line of its own.
  if (!inner.slice(0, start).includes('\n') || !inner.slice(end).includes('\n')) return text
  return inner.slice(start, end)
}

/**
 * The value of a JSON text as a log records it: `-0` reads as 0 (what a
 * JSON round trip gives back), and a number too large for a double is
 * refused (it would read as Infinity, which no log line holds).
 */
function parseLossless(json: string): { value: unknown } | { overflow: true } {
  let overflow = false
  const value: unknown = JSON.parse(json, (_key, item: unknown) => {
    if (typeof item !== 'number') return item
    if (!Number.isFinite(item)) overflow = true
    return Object.is(item, -0) ? 0 : item
  })
  return overflow ? { overflow: true } : { value }
}

/**
 * Validates a one-shot child's final text against its `outputSchema`:
 * `{ output }` (the parsed JSON) or `{ error }` with code
 * `SUBAGENT_INVALID_OUTPUT` naming what is wrong.
 */
export function checkOutput(
  schema: Readonly<Record<string, JsonValue>>,
  text: string | undefined,
): { output: JsonValue } | { error: SubagentError } {
  if (text === undefined)
    return {
      error: new SubagentError(
        'SUBAGENT_INVALID_OUTPUT',
        'The subagent finished without a final message, but its outputSchema requires a JSON result.',
      ),
    }
  let parsed: ReturnType<typeof parseLossless>
  try {
    parsed = parseLossless(jsonText(text))
  } catch {
    return {
      error: new SubagentError(
        'SUBAGENT_INVALID_OUTPUT',
        "The subagent's final message is not JSON, but its outputSchema requires a JSON result matching the schema.",
      ),
    }
  }
  if ('overflow' in parsed)
    return {
      error: new SubagentError(
        'SUBAGENT_INVALID_OUTPUT',
        "The subagent's result holds a number too large to represent (beyond about 1.8e308); its outputSchema needs a JSON result whose numbers fit.",
      ),
    }
  const value = parsed.value
  let validator: z.ZodType
  try {
    validator = compileOutputSchema(schema)
  } catch (error) {
    return { error: new SubagentError('SUBAGENT_INVALID_OUTPUT', (error as Error).message, { cause: error }) }
  }
  const checked = validator.safeParse(value)
  if (checked.success) return { output: value as JsonValue }
  const problems = checked.error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'result'}: ${issue.message}`)
    .join('; ')
  return {
    error: new SubagentError('SUBAGENT_INVALID_OUTPUT', `The subagent's result does not match its outputSchema (${problems}).`, {
      details: { issues: problems },
    }),
  }
}
