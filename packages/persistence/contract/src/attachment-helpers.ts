import type { AttachmentRef, ContentBlock, FileBlock, ImageBlock, Session, SessionEvent, SessionId } from '@dsh/session'
import { SessionPersistenceError } from './errors.js'
import type { AttachmentPutOptions, SessionPersistence } from './types.js'

/** Bytes to attach, with what the reference records of them. */
export interface AttachmentInput extends AttachmentPutOptions {
  readonly bytes: Uint8Array
}

/** The backend's attachment methods, or `SESSION_PERSISTENCE_ATTACHMENTS_UNSUPPORTED`. */
function attachments(persistence: SessionPersistence): Required<Pick<SessionPersistence, 'putAttachment' | 'readAttachment'>> {
  const { putAttachment, readAttachment } = persistence
  if (putAttachment === undefined || readAttachment === undefined) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_ATTACHMENTS_UNSUPPORTED',
      'This persistence backend stores no attachments (it has no putAttachment/readAttachment); use one that does (memory, JSONL).',
    )
  }
  return { putAttachment: putAttachment.bind(persistence), readAttachment: readAttachment.bind(persistence) }
}

/**
 * Stores `input.bytes` beside session `sessionId` and returns the block that
 * references them: `image` for an `image/*` media type, else `file`.
 */
export async function attachmentBlock(
  persistence: SessionPersistence,
  sessionId: SessionId,
  input: AttachmentInput,
): Promise<ImageBlock | FileBlock> {
  const { bytes, ...options } = input
  const attachment = await attachments(persistence).putAttachment(sessionId, bytes, options)
  return Object.freeze({ type: input.mediaType.toLowerCase().startsWith('image/') ? 'image' : 'file', attachment })
}

/**
 * Appends a user message of `text` and attachments from bytes: each is
 * stored first (`putAttachment`), then one `user/message` is appended whose
 * blocks are the text and the references — the log holds references only
 * (bytes inline only at or below `ATTACHMENT_INLINE_MAX_BYTES`). Nothing is
 * appended when a put fails.
 */
export async function appendUserMessage(
  persistence: SessionPersistence,
  session: Session,
  text: string,
  inputs: readonly AttachmentInput[],
): Promise<SessionEvent<'user/message'>> {
  const blocks: ContentBlock[] = []
  for (const input of inputs) blocks.push(await attachmentBlock(persistence, session.header.id, input))
  return session.append('user/message', { text, blocks: [{ type: 'text', text }, ...blocks] })
}

/**
 * Attachment bytes read through the persistence for a renderer: `load`
 * reads the bytes of every `image`/`file` block (tool results' included) not
 * inline in its reference and not read before; `resolve` is the synchronous
 * lookup a renderer's `attachments` option takes.
 */
export interface PersistedAttachments {
  /** The bytes of a loaded attachment, base64, or `undefined` (the renderer counts it missing). */
  readonly resolve: (ref: AttachmentRef) => { readonly base64: string } | undefined
  /**
   * Reads the attachments `messages` reference (anything with `blocks`, e.g. a
   * `SessionContext`'s messages). An attachment the session cannot read is
   * left out (the renderer counts it missing); other failures reject.
   * Resolves to the number of attachments read.
   */
  load(messages: Iterable<{ readonly blocks: readonly unknown[] }>, signal?: AbortSignal): Promise<number>
}

/** The attachment bytes of session `sessionId`, read through `persistence` (see `PersistedAttachments`). */
export function attachmentResolver(persistence: SessionPersistence, sessionId: SessionId): PersistedAttachments {
  const { readAttachment } = attachments(persistence)
  const loaded = new Map<string, string>()
  return {
    resolve: (ref) => {
      const base64 = loaded.get(ref.digest)
      return base64 === undefined ? undefined : { base64 }
    },
    async load(messages, signal) {
      let read = 0
      for (const ref of referencedAttachments(messages)) {
        if (typeof ref.data === 'string' || loaded.has(ref.digest)) continue
        let bytes: Uint8Array
        try {
          bytes = await readAttachment(sessionId, ref.digest, signal)
        } catch (error) {
          if ((error as { code?: string }).code === 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND') continue
          throw error
        }
        loaded.set(ref.digest, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'))
        read++
      }
      return read
    },
  }
}

/** The attachment references of `image`/`file` blocks, tool results' nested content included. */
function* referencedAttachments(messages: Iterable<{ readonly blocks: readonly unknown[] }>): Generator<AttachmentRef> {
  const stack: unknown[] = []
  for (const message of messages) stack.push(...message.blocks)
  while (stack.length > 0) {
    const block = stack.pop() as { type?: unknown; attachment?: unknown; content?: unknown } | null
    if (typeof block !== 'object' || block === null) continue
    if ((block.type === 'image' || block.type === 'file') && isRef(block.attachment)) yield block.attachment
    else if (block.type === 'tool-result' && Array.isArray(block.content)) stack.push(...block.content)
  }
}

function isRef(value: unknown): value is AttachmentRef {
  const ref = value as Partial<AttachmentRef> | null
  return typeof ref === 'object' && ref !== null && typeof ref.digest === 'string' && typeof ref.mediaType === 'string'
}
