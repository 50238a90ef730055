import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { SubagentError } from './errors.js'

// The bounds the runtime holds a caller's input to, checked before anything is
// written. The control tools hold a model to tighter ones; these stand for
// every other caller of the runtime's API, so that nothing it is handed can
// become an event no store accepts (a session holding one could never be
// persisted again).

/**
 * Bytes an input's event keeps for everything but its text: the event's type,
 * seq and time, and the `from` of a `subagent/queued` (a session id, at most
 * `ID_MAX_LENGTH` characters of 6 bytes each when escaped).
 */
const INPUT_EVENT_ENVELOPE_BYTES = 64 * 1024

/**
 * Longest prompt or message (UTF-16 code units) spawn, resume, send and drive
 * take. Each is logged as one event (`user/message {text}`, or `subagent/queued
 * {from, text}` for a busy child), and every store refuses an event over
 * `EVENT_MAX_BYTES`. A JSON string costs at most 6 bytes a code unit (a `\u`
 * escape), so every text up to this length fits, whatever it holds.
 */
export const INPUT_TEXT_MAX_CHARS = Math.floor((EVENT_MAX_BYTES - INPUT_EVENT_ENVELOPE_BYTES) / 6)

/**
 * Deepest nesting (objects and arrays, the settings object itself at depth 1)
 * of a spawn's `settings`. Only an `outputSchema` nests; a real one is a few
 * levels deep. The settings schema, the JSON Schema reader and the session's
 * copy of the logged options all recurse, so deeper input would overflow the
 * stack in one of them.
 */
export const SETTINGS_MAX_DEPTH = 128

/**
 * A run's input (a prompt, or a message sent to a child) must be a string of
 * at most `INPUT_TEXT_MAX_CHARS`; `undefined` (no input) passes.
 */
export function checkInputText(text: unknown, what: 'prompt' | 'message'): void {
  if (text === undefined && what === 'prompt') return
  if (typeof text !== 'string') {
    throw new SubagentError(
      'SUBAGENT_INVALID_ARGUMENT',
      what === 'prompt'
        ? `A prompt must be a string, got ${text === null ? 'null' : typeof text}.`
        : 'A message to a subagent must be a string.',
    )
  }
  if (text.length > INPUT_TEXT_MAX_CHARS) {
    throw new SubagentError(
      'SUBAGENT_INVALID_ARGUMENT',
      `A ${what} is at most ${INPUT_TEXT_MAX_CHARS} characters (INPUT_TEXT_MAX_CHARS), so that the event logging it fits a store's EVENT_MAX_BYTES of ${EVENT_MAX_BYTES}; this one has ${text.length}. Put long content in a file or an attachment and refer to it; nothing was written.`,
      { details: { length: text.length, max: INPUT_TEXT_MAX_CHARS } },
    )
  }
}

/**
 * Most values (objects, arrays and scalars) `settings` may expand to, counted
 * as JSON would write them: an object reached twice counts twice. A real
 * outputSchema has a few hundred; the bound keeps the walk below (and the
 * schema check and the logged copy after it) linear in what a caller can
 * send, where a small graph of shared objects could expand exponentially.
 */
export const SETTINGS_MAX_VALUES = 100_000

/**
 * Refuses `settings` that nest deeper than `SETTINGS_MAX_DEPTH` or expand to
 * more than `SETTINGS_MAX_VALUES` values (`SUBAGENT_INVALID_DESCRIPTOR`). It
 * walks without recursion, so no nesting overflows the stack, and stops at
 * the first value past either bound (a cyclic value is refused the same way).
 */
export function checkSettingsDepth(settings: unknown): void {
  const stack: { value: unknown; depth: number }[] = [{ value: settings, depth: 1 }]
  let values = 0
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!
    if (++values > SETTINGS_MAX_VALUES) {
      throw new SubagentError(
        'SUBAGENT_INVALID_DESCRIPTOR',
        `Cannot spawn: the subagent settings expand to more than ${SETTINGS_MAX_VALUES} values (SETTINGS_MAX_VALUES, an object reached twice counts twice); shorten the outputSchema (use $defs and $ref for a shape used many times).`,
        { details: { max: SETTINGS_MAX_VALUES } },
      )
    }
    if (value === null || typeof value !== 'object') continue
    if (depth > SETTINGS_MAX_DEPTH) {
      throw new SubagentError(
        'SUBAGENT_INVALID_DESCRIPTOR',
        `Cannot spawn: the subagent settings nest deeper than ${SETTINGS_MAX_DEPTH} levels of objects and arrays (SETTINGS_MAX_DEPTH); flatten the outputSchema (use $defs and $ref for a recursive shape).`,
        { details: { max: SETTINGS_MAX_DEPTH } },
      )
    }
    for (const item of Array.isArray(value) ? value : Object.values(value)) stack.push({ value: item, depth: depth + 1 })
  }
}
