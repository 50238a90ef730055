// Deterministic event content, shared by the e2e workers and their parent test.

/** The delta of the chunk stored at `seq` by `writer`: long enough to vary batch sizes. */
export function deltaOf(writer, seq) {
  let state = (seq * 2654435761 + writer.length) >>> 0
  const length = (state % 97) + 8
  let text = `${writer}:${seq}:`
  for (let i = 0; i < length; i++) {
    state = (state * 1103515245 + 12345) >>> 0
    text += String.fromCharCode(97 + ((state >>> 16) % 26))
  }
  return text
}

export { headerOf } from '@dsh/test-kit'

export function line(text) {
  process.stdout.write(`${text}\n`)
}

/** `size` frozen chunk events from `from` on, as `writer` stores them (their deltas from `deltaOf`). */
export function chunkEvents(writer, from, size) {
  const events = []
  for (let i = 0; i < size; i++) {
    const seq = from + i
    events.push(
      Object.freeze({
        type: 'assistant/chunk',
        seq,
        time: 1_700_000_000_000 + seq,
        data: Object.freeze({ turn: 1, index: seq, delta: deltaOf(writer, seq) }),
      }),
    )
  }
  return events
}

/** How many events the stored session `id` holds (0 when it does not exist); loading repairs what a killed writer left. */
export async function storedLength(persistence, id) {
  try {
    return (await persistence.load(id)).events.length
  } catch (error) {
    if (error.code !== 'SESSION_PERSISTENCE_NOT_FOUND') throw error
    return 0
  }
}
