import { textHead } from '@dsh/context'

// The bounds of what a model may hand the control tools and of what one tool
// result carries back. Every input the tools accept and every result they
// return is logged as one event, and a store refuses an event over
// `EVENT_MAX_BYTES` (16 MiB) for good: a session holding one could never be
// persisted again. A JSON string costs at most 6 bytes a character (a `\u`
// escape), so the figures below keep each event well under it.

/** Longest prompt, message or instructions (UTF-16 units): as much as one model step may stream. */
export const TEXT_MAX_CHARS = 1_048_576

/** Longest persona. */
export const PERSONA_MAX_CHARS = 10_000

/** Longest model name, tool name or harness `description` (the child's label). */
export const NAME_MAX_CHARS = 200

/** Most tool names one `tools.allow` or `tools.deny` lists. */
export const TOOL_NAMES_MAX = 256

/** Deepest nesting of an `outputSchema` (objects and arrays); a real schema is a few levels deep. */
export const OUTPUT_SCHEMA_MAX_DEPTH = 64

/** Longest `outputSchema`, as the characters of its JSON. */
export const OUTPUT_SCHEMA_MAX_CHARS = 65_536

/**
 * Characters of subagents' messages one result carries: a `subagent` result,
 * or the final messages and errors of a `wait_agents` call together. A result
 * holds what it carries up to three times (its text, its structured fields and
 * a parsed `output`), so this stays far below `EVENT_MAX_BYTES`.
 */
export const RESULT_TEXT_MAX_CHARS = 262_144

/**
 * `text` cut to `max` characters, with a line saying how much was left out
 * (the cut never splits a surrogate pair); `text` itself when it fits.
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text
  const head = textHead(text, max)
  return `${head}\n[… ${text.length - head.length} more characters cut: a tool result carries at most ${RESULT_TEXT_MAX_CHARS} characters of subagents' messages]`
}

/**
 * How many characters each of `lengths` may keep so that together they stay
 * within `budget`: short ones keep all they have, the rest share what remains
 * equally.
 */
export function shareBudget(lengths: readonly number[], budget: number): number[] {
  const order = lengths.map((length, index) => ({ length, index })).sort((a, b) => a.length - b.length)
  const shares = new Array<number>(lengths.length).fill(0)
  let left = budget
  order.forEach(({ length, index }, position) => {
    const share = Math.min(length, Math.floor(left / (order.length - position)))
    shares[index] = share
    left -= share
  })
  return shares
}

/**
 * Why `value` (parsed JSON) is too deep or too long for an `outputSchema`, or
 * `undefined` when it fits. It walks without recursion, so no nesting can
 * overflow the stack, and stops at the first bound it passes.
 */
export function outputSchemaFault(value: unknown): string | undefined {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }]
  let chars = 0
  while (stack.length > 0) {
    const { value: node, depth } = stack.pop()!
    if (node === null || typeof node !== 'object') {
      chars += typeof node === 'string' ? node.length + 2 : String(node).length
    } else {
      if (depth > OUTPUT_SCHEMA_MAX_DEPTH) return `nests deeper than ${OUTPUT_SCHEMA_MAX_DEPTH} levels`
      chars += 2
      for (const key in node) {
        chars += (Array.isArray(node) ? 0 : key.length + 3) + 1
        if (chars > OUTPUT_SCHEMA_MAX_CHARS) break
        stack.push({ value: (node as Record<string, unknown>)[key], depth: depth + 1 })
      }
    }
    if (chars > OUTPUT_SCHEMA_MAX_CHARS) return `is longer than ${OUTPUT_SCHEMA_MAX_CHARS} characters of JSON`
  }
  return undefined
}
