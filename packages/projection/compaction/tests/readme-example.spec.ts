import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')

describe('README example', () => {
  it('runs and prints what its comments say', async () => {
    const code = readme.match(/```ts\n([\s\S]*?)```/)![1]!
    const lines: string[] = []
    const log = console.log
    console.log = (...args: unknown[]) => void lines.push(args.map(String).join(' '))
    try {
      const { dir } = { dir: new URL('.', import.meta.url).pathname }
      const file = `${dir}.readme-example.ts`
      const { writeFileSync, rmSync } = await import('node:fs')
      writeFileSync(file, code.replace("from '@dsh/compaction'", "from '../src/index.js'"))
      try {
        await import(file)
      } finally {
        rmSync(file, { force: true })
      }
    } finally {
      console.log = log
    }
    expect(lines).toEqual(['4 3', '15'])
  })
})
