import { textHead } from '@dsh/context'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import { SubagentError } from './errors.js'
import type { SubagentSettings } from './options.js'

// The bounds the runtime holds a caller's input to, checked before anything is
// written. The control tools hold a model to tighter ones; these stand for
// every other caller of the runtime's API, so that nothing it is handed can
// become an event no store accepts (a session holding one could never be
// persisted again).

/**
 * Bytes an input's or a report's event keeps for everything but its text: the
 * event's type, seq and time, the `from` of a `subagent/queued` or the `child`
 * of a report notice (a session id, at most `ID_MAX_LENGTH` characters of 6
 * bytes each when escaped), and the notice's `mode` and `label` (at most
 * `SPAWN_LABEL_MAX_CHARS` of 6 bytes each).
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

/**
 * Longest `label` (UTF-16 code units) a spawn takes. A label is the short
 * name a parent addresses its child by: it is logged in the descriptor,
 * repeated in every notice the child's parent receives and in every catalog
 * row, and kept in memory while the child runs. The control tools take at
 * most 200.
 */
export const SPAWN_LABEL_MAX_CHARS = 1_024

/**
 * Longest name a spawn takes: its `provider` and `agentPreset`, and the
 * `agentProvider`, `agentModel` and `model` of its settings. Each is logged
 * (in the descriptor, the options record or the child's header) and kept in
 * memory while the child runs; a real one is a few dozen characters.
 */
export const SPAWN_NAME_MAX_CHARS = 1_024

/**
 * Longest `persona` of a spawn's settings. A persona says who the child is in
 * a few sentences (the control tools take at most 10,000 characters); it is
 * logged in a continuable child's descriptor, which every catalog listing of a
 * cold child reads, so it stays far below what one event could carry.
 */
export const SPAWN_PERSONA_MAX_CHARS = 65_536

/**
 * Bytes of a spawn's `subagent/options` event kept for everything but its
 * instructions: the persona, the names, the tool filter, the `outputSchema`,
 * the budget, and the event's type, seq and time.
 */
const OPTIONS_EVENT_ENVELOPE_BYTES = 4 * 1024 * 1024

/**
 * Longest `instructions` of a spawn's settings. They are logged in the
 * `subagent/options` event, and every store refuses an event over
 * `EVENT_MAX_BYTES`; at 6 bytes a code unit (a `\u` escape) every text up to
 * this length fits, with `OPTIONS_EVENT_ENVELOPE_BYTES` left for the rest of
 * the record. It is twice the control tools' 1 MiB of inline instructions, so
 * an agent definition's body joined with them fits too.
 */
export const SPAWN_INSTRUCTIONS_MAX_CHARS = Math.floor((EVENT_MAX_BYTES - OPTIONS_EVENT_ENVELOPE_BYTES) / 6)

/**
 * Longest text `report` takes. It is logged on the parent as one
 * `subagent/notice {kind: 'report', child, label?, text}` event; at 6 bytes a
 * code unit it fits `EVENT_MAX_BYTES` with the notice's envelope, whatever it
 * holds. The control tools hold a model to 20,000 characters.
 */
export const REPORT_TEXT_MAX_CHARS = Math.floor((EVENT_MAX_BYTES - INPUT_EVENT_ENVELOPE_BYTES) / 6)

/** A report's text must be a non-empty string of at most `REPORT_TEXT_MAX_CHARS` (`SUBAGENT_INVALID_ARGUMENT`). */
export function checkReportText(text: unknown): void {
  if (typeof text !== 'string' || text.length === 0)
    throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', 'A report needs a non-empty text.')
  if (text.length > REPORT_TEXT_MAX_CHARS) {
    throw new SubagentError(
      'SUBAGENT_INVALID_ARGUMENT',
      `A report is at most ${REPORT_TEXT_MAX_CHARS} characters (REPORT_TEXT_MAX_CHARS), so that the notice logging it on the parent fits a store's EVENT_MAX_BYTES of ${EVENT_MAX_BYTES}; this one has ${text.length}. Report a summary and put long content in a file the parent can read; nothing was written.`,
      { details: { length: text.length, max: REPORT_TEXT_MAX_CHARS } },
    )
  }
}

/**
 * Longest failure text (UTF-16 code units) a settled run keeps: the `error`
 * (`<CODE>: <message>`) of its `subagent/end`, of the parent's `settled`
 * notice and of the child's catalog entry. The drivers keep 500 characters of
 * what a server sent; a driver, tool provider or check of the runtime's
 * caller may throw a message of any length, and the text is logged twice and
 * held while the catalog lists the child. A longer one is cut there and says
 * how much was left out.
 */
export const RUN_ERROR_MAX_CHARS = 4_096

/** `text` held to `RUN_ERROR_MAX_CHARS`, cut between characters (never inside a surrogate pair). */
export function boundedRunError(text: string): string {
  if (text.length <= RUN_ERROR_MAX_CHARS) return text
  const head = textHead(text, RUN_ERROR_MAX_CHARS)
  return `${head}… (${text.length - head.length} more characters, RUN_ERROR_MAX_CHARS)`
}

/**
 * Refuses a spawn whose label, names, persona or instructions are longer than
 * their bounds (`SUBAGENT_INVALID_DESCRIPTOR`, like any other spawn option
 * that makes no valid record). Only strings are measured: their types are the
 * settings schema's and the descriptor checks' to refuse.
 */
export function checkSpawnText(
  options: { readonly label?: unknown; readonly provider?: unknown; readonly agentPreset?: unknown },
  settings: SubagentSettings,
): void {
  const short = 'a label is a short name its parent addresses it by; put the task in the prompt'
  checkLength(options.label, 'label', SPAWN_LABEL_MAX_CHARS, 'SPAWN_LABEL_MAX_CHARS', short)
  const names = {
    provider: options.provider,
    agentPreset: options.agentPreset,
    agentProvider: settings.agentProvider,
    agentModel: settings.agentModel,
    model: settings.model,
  }
  for (const [field, value] of Object.entries(names))
    checkLength(value, field, SPAWN_NAME_MAX_CHARS, 'SPAWN_NAME_MAX_CHARS', 'a provider, model or preset is named, not described')
  const persona = 'a persona says in a few sentences who the subagent is; put standing guidance in instructions'
  checkLength(settings.persona, 'persona', SPAWN_PERSONA_MAX_CHARS, 'SPAWN_PERSONA_MAX_CHARS', persona)
  const instructions = `so that the event recording them fits a store's EVENT_MAX_BYTES of ${EVENT_MAX_BYTES}; put long reference material in a file the subagent reads`
  checkLength(settings.instructions, 'instructions', SPAWN_INSTRUCTIONS_MAX_CHARS, 'SPAWN_INSTRUCTIONS_MAX_CHARS', instructions)
}

function checkLength(value: unknown, field: string, max: number, limit: string, remedy: string): void {
  if (typeof value !== 'string' || value.length <= max) return
  throw new SubagentError(
    'SUBAGENT_INVALID_DESCRIPTOR',
    `Cannot spawn: the subagent's ${field} has ${value.length} characters, more than ${max} (${limit}); ${remedy}. Nothing was written.`,
    { details: { field, length: value.length, max } },
  )
}

/** Bytes an event keeps for its type, seq and time around a record's data. */
const RECORD_ENVELOPE_BYTES = 1024

/**
 * Refuses a record spawn would write (its descriptor or options) whose JSON is
 * longer than an event may hold (`SUBAGENT_INVALID_DESCRIPTOR`). The bounds
 * above fit the label, names, persona and instructions; this one holds what
 * they leave unbounded, the strings of an `outputSchema` and a tool filter.
 * Only a record that could be over it is measured in bytes.
 */
export function checkRecordBytes(type: string, data: unknown): void {
  const max = EVENT_MAX_BYTES - RECORD_ENVELOPE_BYTES
  const json = JSON.stringify(data)
  if (json.length * 3 <= max) return
  const bytes = Buffer.byteLength(json)
  if (bytes <= max) return
  throw new SubagentError(
    'SUBAGENT_INVALID_DESCRIPTOR',
    `Cannot spawn: its '${type}' record would encode to ${bytes} bytes, more than the ${max} an event leaves for it (EVENT_MAX_BYTES of ${EVENT_MAX_BYTES}, less its type, seq and time); shorten the outputSchema or the tool filter. Nothing was written.`,
    { details: { event: type, bytes, max } },
  )
}
