import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import { prng } from './prng.js'

const SYLLABLES = [
  'ka',
  'to',
  're',
  'mi',
  'sen',
  'dar',
  'lo',
  've',
  'qu',
  'in',
  'ex',
  'con',
  'fig',
  'port',
  'al',
  'ter',
  'pro',
  'cess',
  'val',
  'ue',
]
const TOOLS = ['read_file', 'bash', 'grep', 'edit']

/** Words and lines drawn from one pseudo-random source. */
export interface TextSource {
  /** One word of a 3,000-word vocabulary, Zipf-like: common words far more often than rare ones, as in model output. */
  word(): string
  /** `n` words joined by spaces. */
  words(n: number): string
  /** One line of code-like text (indentation, a keyword, an assignment from a call). */
  codeLine(): string
}

/**
 * A text source over `random` (see `prng`). Building the vocabulary draws
 * from `random` first, so the words that follow depend only on the seed.
 */
export function textSource(random: () => number): TextSource {
  const vocabulary = Array.from({ length: 3000 }, (_, i) => {
    let word = ''
    for (let n = 1 + (i % 3) + Math.floor(random() * 2); n > 0; n--) word += SYLLABLES[Math.floor(random() * SYLLABLES.length)]!
    return word
  })
  const word = (): string => vocabulary[Math.floor(vocabulary.length * random() ** 3)]!
  const words = (n: number): string => Array.from({ length: n }, word).join(' ')
  const codeLine = (): string =>
    `${'  '.repeat(Math.floor(random() * 4))}${random() < 0.3 ? 'const' : random() < 0.5 ? 'return' : 'if'} ${word()}_${word()} = ${word()}(${word()}, ${Math.floor(random() * 1000)})${random() < 0.5 ? ';' : ' {'}`
  return { word, words, codeLine }
}

/**
 * Turns of a coding-agent session as `[events of one turn]`, the same for the
 * same `seed`: the user asks, the assistant streams 40–400 chunks of one to a
 * few words, calls a tool or two halfway whose results are code-like text,
 * then finishes the message and the turn. Events are frozen, as a `Session`
 * hands them over. Stops once the events' JSON lines (one per event, newline
 * included) add up to `plaintextBytes`.
 */
export function realisticTurns(plaintextBytes: number, seed = 7): StoredSessionEvent[][] {
  const random = prng(seed)
  const { word, words, codeLine } = textSource(random)
  const turns: StoredSessionEvent[][] = []
  let seq = 0
  let time = 1_700_000_000_000
  let bytes = 0
  const event = (into: StoredSessionEvent[], type: string, data: StoredSessionEvent['data']): void => {
    time += 1 + Math.floor(random() * 40)
    const e = Object.freeze({ type, seq: seq++ as SessionSeq, time, data: Object.freeze(data) })
    bytes += JSON.stringify(e).length + 1
    into.push(e)
  }
  for (let turn = 1; bytes < plaintextBytes; turn++) {
    const events: StoredSessionEvent[] = []
    event(events, 'turn/start', { turn })
    event(events, 'user/message', { text: words(8 + Math.floor(random() * 40)) })
    const chunks = 40 + Math.floor(random() * 360)
    let text = ''
    for (let index = 0; index < chunks; index++) {
      const delta = (index === 0 ? '' : ' ') + words(1 + Math.floor(random() * 4))
      text += delta
      event(events, 'assistant/chunk', { turn, index, delta })
      if (index === chunks >> 1) {
        for (let call = 0; call < 1 + Math.floor(random() * 2); call++) {
          const callId = `call_${turn}_${call}`
          event(events, 'tool/call', {
            turn,
            callId,
            name: TOOLS[Math.floor(random() * TOOLS.length)]!,
            arguments: { path: `/work/src/${word()}/${word()}.ts`, pattern: word() },
          })
          event(events, 'tool/result', {
            turn,
            callId,
            content: Array.from({ length: 20 + Math.floor(random() * 120) }, codeLine).join('\n'),
          })
        }
      }
    }
    event(events, 'assistant/message', { turn, text, usage: { input: 1000 + Math.floor(random() * 50_000), output: chunks * 3 } })
    event(events, 'turn/end', { turn, reason: 'completed' })
    turns.push(events)
  }
  return turns
}
