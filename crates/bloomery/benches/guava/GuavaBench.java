// Guava's own BloomFilter on the JVM, with the same keys as benches/compare.rs
// (splitmix64 streams, Funnels.longFunnel(), 1%), for the Guava row of the comparison.
// Usage: java -cp guava.jar:. GuavaBench N PROBES REPS
// Prints: insert_ns=.. present_ns=.. absent_ns=.. fpr=.. bits=..
import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnels;
import java.io.ByteArrayOutputStream;
import java.util.Arrays;

public class GuavaBench {
  static final long INSERT_SEED = 1L;
  static final long ABSENT_SEED = 0x5555555555555555L;

  static long[] keys(long seed, int count) {
    long[] out = new long[count];
    long state = seed;
    for (int i = 0; i < count; i++) {
      state += 0x9e3779b97f4a7c15L;
      long z = state;
      z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
      z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
      out[i] = z ^ (z >>> 31);
    }
    return out;
  }

  static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  public static void main(String[] args) throws Exception {
    int n = Integer.parseInt(args[0]);
    int probes = Math.min(n, Integer.parseInt(args[1]));
    int reps = Integer.parseInt(args[2]);
    long[] inserted = keys(INSERT_SEED, n);
    long[] absent = keys(ABSENT_SEED, probes);
    double[] insertNs = new double[reps], presentNs = new double[reps], absentNs = new double[reps];
    long falsePositives = 0;
    long bits = 0;
    for (int rep = 0; rep < reps; rep++) {
      BloomFilter<Long> filter = BloomFilter.create(Funnels.longFunnel(), n, 0.01);
      long start = System.nanoTime();
      for (long key : inserted) filter.put(key);
      insertNs[rep] = (System.nanoTime() - start) / (double) n;
      start = System.nanoTime();
      long found = 0;
      for (int i = 0; i < probes; i++) if (filter.mightContain(inserted[i])) found++;
      presentNs[rep] = (System.nanoTime() - start) / (double) probes;
      if (found != probes) throw new AssertionError("false negative");
      start = System.nanoTime();
      falsePositives = 0;
      for (long key : absent) if (filter.mightContain(key)) falsePositives++;
      absentNs[rep] = (System.nanoTime() - start) / (double) probes;
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      filter.writeTo(bytes);
      bits = (bytes.size() - 6) * 8L;
    }
    System.out.printf(java.util.Locale.ROOT, "insert_ns=%.2f present_ns=%.2f absent_ns=%.2f fpr=%.6f bits=%d%n",
        median(insertNs), median(presentNs), median(absentNs), falsePositives / (double) probes, bits);
  }
}
