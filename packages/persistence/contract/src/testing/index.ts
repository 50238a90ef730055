// `@dsh/session-persistence/testing`: the contract suite every backend runs
// from a spec file. vitest is an optional peer of this package, needed only
// by test files that import this entry.
import { afterEach, describe } from 'vitest'
import { describeAttachments } from './attachments.js'
import { describeChangeFeed } from './change-feed.js'
import type { PersistenceContractFactory, PersistenceContractFactoryOptions, PersistenceContractHarness } from './fixtures.js'
import { describeForks } from './forks.js'
import { describeLimits } from './limits.js'
import { describeRanges } from './ranges.js'
import { describeReads } from './reads.js'
import { describeRoundTrip } from './round-trip.js'
import { describeWrites } from './writes.js'

export type {
  PersistenceContractFactory,
  PersistenceContractFactoryOptions,
  PersistenceContractHarness,
  StoredAttachmentCopy,
} from './fixtures.js'

/**
 * The persistence contract every backend passes. Call it at the top level of
 * a spec file: `describePersistenceContract('jsonl', (o) => openJsonlHarness(o))`.
 * Each test opens a fresh root through `factory()` and cleans it up.
 */
export function describePersistenceContract(name: string, factory: PersistenceContractFactory): void {
  describe(`${name}: session persistence contract`, () => {
    const open: PersistenceContractHarness[] = []
    afterEach(async () => {
      // Harnesses over an existing root first: the owner removes the storage last.
      for (const harness of open.splice(0).reverse()) await harness.cleanup()
    })
    async function fresh(options?: PersistenceContractFactoryOptions): Promise<PersistenceContractHarness> {
      const harness = await factory(options)
      open.push(harness)
      return harness
    }

    describeWrites(fresh)
    describeReads(fresh)
    describeRanges(fresh)
    describeRoundTrip(fresh)
    describeChangeFeed(fresh)
    describeForks(fresh)
    describeLimits(fresh)
    describeAttachments(fresh)
  })
}
