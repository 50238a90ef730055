import { textHead } from '@dsh/context'
import { type ContentBlock, freezeLosslessJson, type JsonValue } from '@dsh/session'
import { EVENT_MAX_BYTES } from '@dsh/session-persistence/backend'
import type { ShadowedRange } from './range.js'
import type { Summary } from './types.js'

/** The longest failure text a `compaction/end {error}` stores (an error can echo a whole request). */
export const MAX_STORED_ERROR_CHARS = 2_000

/** The text of a failure as `compaction/end {error}` stores it: at most {@link MAX_STORED_ERROR_CHARS} characters. */
export function storedError(message: string): string {
  return message.length > MAX_STORED_ERROR_CHARS ? `${textHead(message, MAX_STORED_ERROR_CHARS)}…` : message
}

const isBlock = (value: unknown): value is ContentBlock =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { type?: unknown }).type === 'string'

const isText = (block: ContentBlock): boolean =>
  block.type === 'text' && typeof (block as { text?: unknown }).text === 'string' && (block as { text: string }).text.trim().length > 0

/**
 * The data of the `compaction/summary` event a summarizer's answer makes,
 * or why the answer cannot be stored (a summarizer failure): the summary
 * must be a string or an array of blocks holding some non-blank text (a
 * summary the model cannot read would empty the context), lossless JSON
 * (an append would refuse it), and its event at most `EVENT_MAX_BYTES` (a
 * backend would refuse it and the session's later events with it).
 */
export function summaryData(
  answer: unknown,
  compactionId: string,
  range: ShadowedRange,
  seq: number,
): { data: JsonValue } | { error: string } {
  if (typeof answer !== 'object' || answer === null) return { error: 'the summarizer returned no answer object' }
  const { summary, provider, model, usage } = answer as Partial<Summary>
  let blocks: unknown[]
  if (typeof summary === 'string') blocks = [{ type: 'text', text: summary }]
  else if (Array.isArray(summary)) blocks = [...summary]
  else return { error: 'the summarizer returned a summary that is neither text nor an array of blocks' }
  if (!blocks.every(isBlock)) return { error: 'the summarizer returned a summary holding something other than blocks' }
  if (!blocks.some(isText)) return { error: 'the summarizer returned an empty summary' }
  const data = {
    compactionId,
    summary: blocks as unknown as JsonValue,
    from: range.from,
    to: range.to,
    ...(provider === undefined ? {} : { provider }),
    ...(model === undefined ? {} : { model }),
    ...(usage === undefined ? {} : { usage: usage as unknown as JsonValue }),
  }
  let frozen: JsonValue
  try {
    frozen = freezeLosslessJson(data as JsonValue, "'compaction/summary' data")
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) }
  }
  // `time` as the longest a safe integer prints: the encoded line is at most this long.
  const bytes = Buffer.byteLength(JSON.stringify({ type: 'compaction/summary', seq, time: Number.MAX_SAFE_INTEGER, data: frozen }))
  if (bytes > EVENT_MAX_BYTES)
    return { error: `the summary encodes to ${bytes} bytes, over the ${EVENT_MAX_BYTES} bytes an event may hold (EVENT_MAX_BYTES)` }
  return { data: frozen }
}
