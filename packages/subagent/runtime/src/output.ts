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

/** The JSON inside a final message: the whole text, or the one fenced ```json block it consists of. */
function jsonText(text: string): string {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text)
  return fenced === null ? text : fenced[1]!
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
  let value: unknown
  try {
    value = JSON.parse(jsonText(text))
  } catch {
    return {
      error: new SubagentError(
        'SUBAGENT_INVALID_OUTPUT',
        "The subagent's final message is not JSON, but its outputSchema requires a JSON result matching the schema.",
      ),
    }
  }
  let validator: z.ZodType
  try {
    validator = compileOutputSchema(schema)
  } catch (error) {
    return { error: new SubagentError('SUBAGENT_INVALID_OUTPUT', (error as Error).message, { cause: error }) }
  }
  const parsed = validator.safeParse(value)
  if (parsed.success) return { output: value as JsonValue }
  const problems = parsed.error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'result'}: ${issue.message}`)
    .join('; ')
  return {
    error: new SubagentError('SUBAGENT_INVALID_OUTPUT', `The subagent's result does not match its outputSchema (${problems}).`, {
      details: { issues: problems },
    }),
  }
}
