import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionQueryContractSuite } from '../src/contract-suite.js'
import { createSessionQuery } from '../src/index.js'

sessionQueryContractSuite('in-memory query over in-memory persistence', {
  async createPersistence() {
    const persistence = createMemoryPersistence()
    return { persistence, cleanup: () => persistence.close() }
  },
  openQuery: (sources) => createSessionQuery(sources),
})
