package faults

import (
	"math/rand/v2"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// loss is an entry of a method's list of lost answers.
type loss struct {
	err error
	// share is the probability that a successful call loses its answer
	// (1 for LoseNext).
	share float64
	// left is how many more answers the entry may lose before it is
	// removed; negative for no limit.
	left int
}

// LoseNext makes the next n calls of method that the emulator answers
// successfully lose their answer: the emulator has done the call's work
// (created the task, committed the write), and the caller gets a status
// of code and msg instead, as when its deadline passes or its connection
// breaks after the service accepted the call. Give DEADLINE_EXCEEDED or
// UNAVAILABLE, as the real service's callers see them. Only unary
// methods' answers are lost.
func (in *Injector) LoseNext(method string, n int, code codes.Code, msg string) {
	if n > 0 {
		in.addLoss(method, &loss{err: status.Error(code, msg), share: 1, left: n})
	}
}

// LoseShare makes each later successful call of method lose its answer
// with probability share (0 to 1), as LoseNext does, until RemoveFaults.
func (in *Injector) LoseShare(method string, share float64, code codes.Code, msg string) {
	if share > 0 {
		in.addLoss(method, &loss{err: status.Error(code, msg), share: min(share, 1), left: -1})
	}
}

// Lost is how many answers of method were lost (LoseNext, LoseShare):
// calls that the emulator served and whose callers got an error.
func (in *Injector) Lost(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.method(method).lost
}

func (in *Injector) addLoss(name string, l *loss) {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := in.method(name)
	m.losses = append(m.losses, l)
}

// lose decides whether the answer of a call of the method named name
// that the emulator served successfully is lost, and returns the error
// its caller gets instead.
func (in *Injector) lose(name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := in.method(name)
	for i, l := range m.losses {
		if l.share < 1 && rand.Float64() >= l.share {
			continue
		}
		if l.left > 0 {
			l.left--
			if l.left == 0 {
				m.losses = append(m.losses[:i:i], m.losses[i+1:]...)
			}
		}
		m.lost++
		return l.err
	}
	if f := pick(Lose, m, in.method(AnyMethod)); f != nil {
		m.lost++
		return f.err()
	}
	return nil
}

// loseInjected is lose with the faults of Inject alone.
func (in *Injector) loseInjected(name string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	m := in.method(name)
	if f := pick(Lose, m, in.method(AnyMethod)); f != nil {
		m.lost++
		return f.err()
	}
	return nil
}
