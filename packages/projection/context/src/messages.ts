import type { ContextMessage } from './types.js'

/**
 * The committed messages live in chunks of at most `CHUNK_SIZE`, so
 * appending a message copies one chunk and the list of chunks (states are
 * never mutated), not the whole transcript.
 */
export const CHUNK_SIZE = 64

type Chunks = readonly (readonly ContextMessage[])[]

export function pushMessage(chunks: Chunks, message: ContextMessage): Chunks {
  const last = chunks.at(-1)
  if (last === undefined || last.length >= CHUNK_SIZE) return [...chunks, [message]]
  return [...chunks.slice(0, -1), [...last, message]]
}

/** The chunks without their last message. */
export function popMessage(chunks: Chunks): Chunks {
  const last = chunks.at(-1)
  if (last === undefined) return chunks
  return last.length <= 1 ? chunks.slice(0, -1) : [...chunks.slice(0, -1), last.slice(0, -1)]
}

export function flatten(chunks: Chunks): ContextMessage[] {
  const out: ContextMessage[] = []
  for (const chunk of chunks) for (const message of chunk) out.push(message)
  return out
}

export function toChunks(messages: readonly ContextMessage[]): Chunks {
  const out: ContextMessage[][] = []
  for (let i = 0; i < messages.length; i += CHUNK_SIZE) out.push(messages.slice(i, i + CHUNK_SIZE))
  return out
}

/** The chunks with `change` applied to every message; unchanged chunks (and the whole list, when nothing changed) keep their reference. */
export function mapMessages(chunks: Chunks, change: (message: ContextMessage) => ContextMessage): Chunks {
  let changed = false
  const out = chunks.map((chunk) => {
    let chunkChanged = false
    const next = chunk.map((message) => {
      const updated = change(message)
      if (updated !== message) chunkChanged = true
      return updated
    })
    if (!chunkChanged) return chunk
    changed = true
    return next
  })
  return changed ? out : chunks
}
