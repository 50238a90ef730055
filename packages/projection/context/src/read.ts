import { ATTACHMENT_INLINE_MAX_BYTES, type AttachmentRef, type JsonValue, type ToolCallBlock } from '@dsh/session'
import { z } from 'zod/mini'
import type { ContextBlock } from './types.js'

/**
 * Readers of block-bearing event data. Each returns what it could read and
 * counts what it could not; none throws. Blocks come out normalized: only
 * the vocabulary's fields, the harness's spellings translated
 * (`toolCallId` → `callId`, a raw `arguments` string → `input`, an image
 * reference `{attachmentId: 'sha256:<hex>', bytes}` → `{digest, size}`).
 */

/** Counts of what a read skipped (`invalid`) or kept unread (`unknown`). */
export interface ReadCounts {
  invalid: number
  unknown: number
}

export type Json = { readonly [key: string]: unknown }

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const count = z.int().check(z.nonnegative())
const digest = z.string().check(z.regex(/^[0-9a-f]{64}$/))
const mediaType = z.string().check(z.minLength(1))

const dshRef = z.object({
  digest,
  mediaType,
  size: count,
  name: z.optional(z.string()),
  width: z.optional(count),
  height: z.optional(count),
  data: z.optional(z.string()),
})
const harnessRef = z.object({
  attachmentId: z.string().check(z.regex(/^sha256:[0-9a-f]{64}$/)),
  mediaType,
  bytes: count,
  width: z.optional(count),
  height: z.optional(count),
  name: z.optional(z.string()),
})

const textBlock = z.object({ text: z.string() })
const reasoningBlock = z.object({ text: z.string(), signature: z.optional(z.string()) })
const attachmentBlock = z.object({ attachment: z.unknown() })
const toolCallBlock = z.object({ id: z.string(), name: z.string(), input: z.optional(z.json()), arguments: z.optional(z.string()) })
const toolResultBlock = z.object({
  callId: z.optional(z.string()),
  toolCallId: z.optional(z.string()),
  content: z.unknown(),
  isError: z.optional(z.boolean()),
})
const unknownBlock = z.record(z.string(), z.json())

function readRef(value: unknown): AttachmentRef | undefined {
  const dsh = dshRef.safeParse(value)
  if (dsh.success) {
    const { digest, mediaType, size, name, width, height, data } = dsh.data
    if (data !== undefined && size > ATTACHMENT_INLINE_MAX_BYTES) return undefined
    return {
      digest,
      mediaType,
      size,
      ...(name === undefined ? {} : { name }),
      ...(width === undefined ? {} : { width }),
      ...(height === undefined ? {} : { height }),
      ...(data === undefined ? {} : { data }),
    }
  }
  const harness = harnessRef.safeParse(value)
  if (!harness.success) return undefined
  const { attachmentId, bytes, width, height, name } = harness.data
  return {
    digest: attachmentId.slice('sha256:'.length),
    mediaType: harness.data.mediaType,
    size: bytes,
    ...(name === undefined ? {} : { name }),
    ...(width === undefined ? {} : { width }),
    ...(height === undefined ? {} : { height }),
  }
}

/** The parsed form of raw tool arguments: the JSON they hold, or the text itself when it is not JSON. */
export function parseArguments(raw: string): JsonValue {
  if (raw.trim().length === 0) return {}
  try {
    return JSON.parse(raw) as JsonValue
  } catch {
    return raw
  }
}

/** A tool call from `{id, name, input?, arguments?}`; `undefined` when neither input nor arguments is there. */
export function toolCallOf(id: string, name: string, input: JsonValue | undefined, raw: string | undefined): ToolCallBlock | undefined {
  if (raw !== undefined) return { type: 'tool-call', id, name, input: input ?? parseArguments(raw), arguments: raw }
  if (input === undefined) return undefined
  return { type: 'tool-call', id, name, input }
}

/** One block, normalized; `undefined` when it is a known type with a bad shape (counted). */
export function readBlock(value: unknown, counts: ReadCounts): ContextBlock | undefined {
  if (!isObject(value) || typeof value.type !== 'string') {
    counts.invalid++
    return undefined
  }
  const invalid = (): undefined => {
    counts.invalid++
    return undefined
  }
  switch (value.type) {
    case 'text': {
      const read = textBlock.safeParse(value)
      return read.success ? { type: 'text', text: read.data.text } : invalid()
    }
    case 'reasoning': {
      const read = reasoningBlock.safeParse(value)
      if (!read.success) return invalid()
      const { text, signature } = read.data
      return signature === undefined ? { type: 'reasoning', text } : { type: 'reasoning', text, signature }
    }
    case 'image':
    case 'file': {
      const read = attachmentBlock.safeParse(value)
      const attachment = read.success ? readRef(read.data.attachment) : undefined
      return attachment === undefined ? invalid() : { type: value.type, attachment }
    }
    case 'tool-call': {
      const read = toolCallBlock.safeParse(value)
      if (!read.success) return invalid()
      return toolCallOf(read.data.id, read.data.name, read.data.input as JsonValue | undefined, read.data.arguments) ?? invalid()
    }
    case 'tool-result': {
      const read = toolResultBlock.safeParse(value)
      const callId = read.success ? (read.data.callId ?? read.data.toolCallId) : undefined
      if (!read.success || callId === undefined) return invalid()
      const content = Array.isArray(read.data.content)
        ? resultContent(readBlocks(read.data.content, counts), counts)
        : textOfJson(read.data.content)
      if (content === undefined) return invalid()
      return read.data.isError === true ? { type: 'tool-result', callId, content, isError: true } : { type: 'tool-result', callId, content }
    }
    default: {
      const read = unknownBlock.safeParse(value)
      if (!read.success) return invalid()
      counts.unknown++
      return read.data as ContextBlock
    }
  }
}

/** The blocks of an array (bad ones dropped and counted); `undefined` when `value` is not an array. */
export function readBlocks(value: unknown, counts: ReadCounts): ContextBlock[] | undefined {
  if (!Array.isArray(value)) return undefined
  const out: ContextBlock[] = []
  for (const item of value) {
    const block = readBlock(item, counts)
    if (block !== undefined) out.push(block)
  }
  return out
}

/**
 * A tool result's content blocks without the `tool-result` blocks nested in
 * them: a result is not content of another (a tool message holds exactly one
 * result, which no protocol can nest), so each is dropped and counted as
 * invalid where a renderer would leave it out unseen.
 */
export function resultContent(blocks: ContextBlock[] | undefined, counts: ReadCounts): ContextBlock[] | undefined {
  if (blocks === undefined || !blocks.some((block) => block.type === 'tool-result')) return blocks
  const kept = blocks.filter((block) => block.type !== 'tool-result')
  counts.invalid += blocks.length - kept.length
  return kept
}

/**
 * A tool's JSON outcome as the model reads it: a string as it is, an error
 * `{code, message}` as `Error <code>: <message>`, an object's `text` field,
 * anything else as its JSON text. `undefined` for no value.
 */
export function toolOutcomeText(content: unknown, isError: boolean): string | undefined {
  if (content === undefined) return undefined
  if (isObject(content)) {
    if (isError && typeof content.code === 'string' && typeof content.message === 'string')
      return `Error ${content.code}: ${content.message}`
    if (typeof content.text === 'string') return content.text
  }
  return typeof content === 'string' ? content : JSON.stringify(content)
}

function textOfJson(content: unknown): ContextBlock[] | undefined {
  const text = toolOutcomeText(content, false)
  return text === undefined ? undefined : [{ type: 'text', text }]
}
