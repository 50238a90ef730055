import type { AttachmentRef, ContentBlock, ContentBlockType, JsonValue, ToolCallBlock } from '@dsh/session'
import type { ContextBlock, ContextMessage, SessionContext, SessionContextState } from '../types.js'
import { viewLayout } from '../view.js'

/**
 * What a renderer left out or replaced, by reason. A renderer never throws
 * on content; every such case is counted:
 * - `unknown-block`: a block of a type the renderer does not know (skipped);
 * - `missing-attachment`: an image or file whose bytes neither the reference nor the resolver holds (a text placeholder is sent);
 * - `unsupported-block`: a block the protocol cannot carry where it sits (e.g. an image in a Chat tool result; a text note is sent);
 * - `reasoning-dropped`: a reasoning block the protocol cannot take back (Chat always; Responses without a signature and item id; Anthropic without a signature);
 * - `system-as-user`: an Anthropic system message after the conversation began, sent as user text;
 * - `missing-model`: neither the options nor the context name a model (the body's `model` is empty);
 * - `previous-response-unusable`: the given previous response does not match the context (compacted since, or not found in it), so the whole input is sent without it.
 */
export const RENDER_WARNINGS = [
  'unknown-block',
  'missing-attachment',
  'unsupported-block',
  'reasoning-dropped',
  'system-as-user',
  'missing-model',
  'previous-response-unusable',
] as const
export type RenderWarning = (typeof RENDER_WARNINGS)[number]
export type RenderWarnings = { [W in RenderWarning]: number }

/** A rendered request body and what rendering it left out. */
export type Rendered<Body> = { readonly body: Body; readonly warnings: RenderWarnings }

/** Attachment bytes, base64. */
export type AttachmentBytes = { readonly base64: string }

/**
 * Looks up the bytes of an attachment stored beside the session. Renderers
 * are pure: the caller reads the bytes first (e.g. for the attachments the
 * context references) and hands them over by digest.
 */
export type AttachmentResolver = (ref: AttachmentRef) => AttachmentBytes | undefined

/** Options every renderer takes. */
export type RenderOptions = {
  /** The model to address; defaults to the context's newest model. */
  readonly model?: string
  /** Bytes of attachments not inline in their reference. */
  readonly attachments?: AttachmentResolver
  /**
   * Maps each context message before it renders (a driver phrasing its
   * notice blocks as text); `null` leaves the message out. The Chat and
   * Responses renderers call it once per message they render, so an
   * incremental renderer calls it for a step's new messages only.
   */
  readonly rewrite?: (message: ContextMessage) => ContextMessage | null
}

/** `message` as `options.rewrite` maps it (itself without one); `null`: left out. */
export function rewritten(options: RenderOptions, message: ContextMessage): ContextMessage | null {
  return options.rewrite === undefined ? message : options.rewrite(message)
}

export function noWarnings(): RenderWarnings {
  const out = {} as { -readonly [W in RenderWarning]: number }
  for (const w of RENDER_WARNINGS) out[w] = 0
  return out
}

/** Per-message warning counts, sparse. */
export type WarningCounts = { -readonly [W in RenderWarning]?: number }

/** Sparse counts summed into a full record. */
export function totalWarnings(...counts: WarningCounts[]): RenderWarnings {
  const out = noWarnings()
  for (const c of counts) addCounts(out, c, 1)
  return out
}

export function warn(counts: WarningCounts, warning: RenderWarning): void {
  counts[warning] = (counts[warning] ?? 0) + 1
}

function addCounts(into: { -readonly [W in RenderWarning]: number }, counts: WarningCounts, sign: 1 | -1): void {
  for (const w of RENDER_WARNINGS) {
    const n = counts[w]
    if (n !== undefined) into[w] += sign * n
  }
}

const KNOWN: ReadonlySet<string> = new Set<ContentBlockType>(['text', 'reasoning', 'image', 'file', 'tool-call', 'tool-result'])

/** The block as a known content block, or undefined for a block of a type the renderers do not know. */
export function known(block: ContextBlock): ContentBlock | undefined {
  return KNOWN.has(block.type) ? (block as ContentBlock) : undefined
}

/** A message's blocks of known types; each unknown one is counted and left out. */
export function knownBlocks(message: ContextMessage, counts: WarningCounts): ContentBlock[] {
  const out: ContentBlock[] = []
  for (const block of message.blocks) {
    const k = known(block)
    if (k === undefined) warn(counts, 'unknown-block')
    else out.push(k)
  }
  return out
}

/** The bytes of an attachment: inline in the reference, else from the resolver. */
export function bytesOf(ref: AttachmentRef, resolver: AttachmentResolver | undefined): string | undefined {
  if (typeof ref.data === 'string') return ref.data
  return resolver?.(ref)?.base64
}

export function dataUrl(ref: AttachmentRef, base64: string): string {
  return `data:${ref.mediaType};base64,${base64}`
}

/** What the model reads where an attachment's bytes are missing. */
export function missingAttachmentText(ref: AttachmentRef): string {
  return `[attachment ${ref.name ?? ref.digest.slice(0, 12)} (${ref.mediaType}, ${ref.size} bytes) is not available]`
}

/** What the model reads where the protocol cannot carry a block. */
export function unsupportedText(what: string, ref?: AttachmentRef): string {
  const name = ref === undefined ? '' : ` ${ref.name ?? ref.digest.slice(0, 12)} (${ref.mediaType})`
  return `[${what}${name} omitted: not supported here]`
}

/** A tool call's arguments as the provider sent them, else its input as JSON. */
export function argumentsOf(call: ToolCallBlock): string {
  return call.arguments ?? JSON.stringify(call.input)
}

/** How an error result is marked where a protocol has no error flag. */
export function errorText(text: string): string {
  return text.startsWith('Error') ? text : `Error: ${text}`
}

/** Structural equality of two JSON values. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false
    return true
  }
  if (Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.length !== kb.length) return false
  for (const k of ka) {
    if (!Object.hasOwn(b, k)) return false
    if (!sameJson((a as Record<string, JsonValue>)[k], (b as Record<string, JsonValue>)[k])) return false
  }
  return true
}

/** Counts of an incremental renderer's work, for bounding its cost by counts. */
export type RenderStats = {
  /** Messages rendered (each costs the message's size). */
  readonly rendered: number
  /** Messages whose earlier rendering was kept. */
  readonly reused: number
  /** Renders that found a changed message before the end of the previous context (a compaction, a prune, a replaced open step). */
  readonly rebuilds: number
  /** Kept messages compared with the new context's to find the first change (a layout skips the chunks both share). */
  readonly compared: number
}

/**
 * Rendered parts of a message list, kept between renders. `sync` finds the
 * first message that differs from the previous list (same object, or equal
 * JSON for messages the view rebuilds, such as synthetic results and the
 * open step) and renders only from there: appending k messages renders k.
 * `syncContext` finds it from the view's layout when the context has one:
 * one reference compare per chunk of messages, then the messages of the
 * first changed chunk and the short tail, so a step costs its new messages
 * and never a pass over the whole list.
 */
export class MessageParts<P> {
  private readonly messages: ContextMessage[] = []
  readonly parts: P[] = []
  private readonly counts: WarningCounts[] = []
  private readonly totals = noWarnings()
  private stats: RenderStats = { rendered: 0, reused: 0, rebuilds: 0, compared: 0 }
  /** The chunks of the layout synced last (`syncContext`), and how many messages they hold. */
  private chunks: SessionContextState['chunks'] = []

  constructor(private readonly render: (message: ContextMessage, counts: WarningCounts) => P) {}

  /** Brings the parts up to `messages`; returns the index of the first part rendered anew. */
  sync(messages: readonly ContextMessage[]): number {
    this.chunks = []
    return this.syncFrom(0, messages.length, (i) => messages[i] as ContextMessage)
  }

  /** Brings the parts up to the context's messages, reading its layout when it has one; returns the index of the first part rendered anew. */
  syncContext(context: SessionContext): number {
    const layout = viewLayout(context)
    if (layout === undefined) return this.sync(context.messages)
    const { chunks, committed, tail } = layout
    // The chunks both layouts share by reference hold the same messages in the same places: one compare per chunk.
    let same = 0
    let offset = 0
    const shared = Math.min(chunks.length, this.chunks.length)
    while (same < shared && chunks[same] === this.chunks[same]) offset += (chunks[same++] as readonly ContextMessage[]).length
    this.chunks = chunks
    // Messages are asked for in increasing order: a cursor walks the chunks once.
    let c = same
    let start = offset
    const at = (i: number): ContextMessage => {
      if (i >= committed) return tail[i - committed] as ContextMessage
      if (i < start) {
        c = 0
        start = 0
      }
      while (start + (chunks[c] as readonly ContextMessage[]).length <= i) start += (chunks[c++] as readonly ContextMessage[]).length
      return (chunks[c] as readonly ContextMessage[])[i - start] as ContextMessage
    }
    return this.syncFrom(Math.min(offset, this.messages.length), committed + tail.length, at)
  }

  /** Syncs the `total` messages `at` gives, knowing the first `known` are the kept ones. */
  private syncFrom(known: number, total: number, at: (index: number) => ContextMessage): number {
    const kept = this.messages.length
    let from = known
    const limit = Math.min(kept, total)
    while (from < limit) {
      const next = at(from)
      const prev = this.messages[from] as ContextMessage
      if (next !== prev && !sameJson(next, prev)) break
      if (next !== prev) this.messages[from] = next
      from++
    }
    for (let i = from; i < kept; i++) addCounts(this.totals, this.counts[i] as WarningCounts, -1)
    this.messages.length = from
    this.parts.length = from
    this.counts.length = from
    for (let i = from; i < total; i++) {
      const message = at(i)
      const counts: WarningCounts = {}
      this.parts.push(this.render(message, counts))
      this.messages.push(message)
      this.counts.push(counts)
      addCounts(this.totals, counts, 1)
    }
    this.stats = {
      rendered: this.stats.rendered + total - from,
      reused: this.stats.reused + from,
      rebuilds: this.stats.rebuilds + (from < kept ? 1 : 0),
      compared: this.stats.compared + Math.min(from + 1, limit) - known,
    }
    return from
  }

  message(index: number): ContextMessage | undefined {
    return this.messages[index]
  }

  get length(): number {
    return this.messages.length
  }

  /** The warnings of all parts, plus `extra`. */
  warnings(extra?: WarningCounts): RenderWarnings {
    const out = { ...this.totals }
    if (extra !== undefined) addCounts(out, extra, 1)
    return out
  }

  /** The warnings of the parts from `index` on (what a request sending only those carries), plus `extra`. */
  warningsFrom(index: number, extra?: WarningCounts): RenderWarnings {
    if (index <= 0) return this.warnings(extra)
    const out = noWarnings()
    for (let i = index; i < this.counts.length; i++) addCounts(out, this.counts[i] as WarningCounts, 1)
    if (extra !== undefined) addCounts(out, extra, 1)
    return out
  }

  get counters(): RenderStats {
    return this.stats
  }
}

/**
 * Parts that are lists (each message renders to zero or more items), kept
 * flat after `head` (items that come before every message's, e.g. a system
 * message): `sync` re-renders from the first changed message and rebuilds
 * the flat list only from there.
 */
export class FlatParts<T> {
  readonly parts: MessageParts<T[]>
  private readonly flat: T[]
  /** Where each message's items begin in `flat`. */
  private readonly offsets: number[] = []

  constructor(render: (message: ContextMessage, counts: WarningCounts) => T[], head: readonly T[] = []) {
    this.parts = new MessageParts(render)
    this.flat = [...head]
  }

  sync(messages: readonly ContextMessage[]): void {
    this.rebuildFrom(this.parts.sync(messages))
  }

  /** `sync` of a context's messages, found from its layout when it has one (see `MessageParts.syncContext`). */
  syncContext(context: SessionContext): void {
    this.rebuildFrom(this.parts.syncContext(context))
  }

  private rebuildFrom(from: number): void {
    this.flat.length = this.offsets[from] ?? this.flat.length
    this.offsets.length = from
    for (let i = from; i < this.parts.length; i++) {
      this.offsets.push(this.flat.length)
      for (const item of this.parts.parts[i] as T[]) this.flat.push(item)
    }
  }

  /** The items of the messages from `index` on (a copy; the head only with index 0). */
  itemsFrom(index: number): T[] {
    return this.flat.slice(index === 0 ? 0 : (this.offsets[index] ?? this.flat.length))
  }

  /** Every item, head first: the kept list itself, not a copy (the next `sync` changes it). */
  items(): readonly T[] {
    return this.flat
  }
}

/** An incremental renderer: renders a context, keeping what it rendered so the next render costs only the messages that changed. */
export interface IncrementalRenderer<Body> {
  render(context: SessionContext): Rendered<Body>
  readonly stats: RenderStats
}

export function modelOf(options: RenderOptions, context: SessionContext, counts: WarningCounts): string {
  const model = options.model ?? context.model ?? context.step?.model ?? null
  if (model === null) {
    warn(counts, 'missing-model')
    return ''
  }
  return model
}
