import { blockText, type Summarizer } from '@dsh/compaction'

/**
 * An extractive summarizer: the first sentence of every shadowed message, in
 * order. Deterministic, so tests can assert on the summary; the model-backed
 * one lives in a driver package.
 */
export const extractive: Summarizer = {
  async summarize({ context }) {
    const lines = context.messages.map((m) => `${m.role}: ${m.blocks.map(blockText).join(' ').split('.')[0]!.slice(0, 60)}`)
    return { summary: `Summary of ${context.messages.length} messages.\n${lines.join('\n')}`, provider: 'test', model: 'extractive' }
  },
}
