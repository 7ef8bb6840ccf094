// Cost per MB of sending a cold file over loopback TCP (docs/performance.md, "Direct reads of
// the backlog"). Build: gcc -O2 -o /tmp/send scripts/send-cold-file.c. Run: write a file with
// O_DIRECT (dd if=/dev/urandom of=F bs=1M count=512 oflag=direct), then /tmp/send F MODE.
// Listens on 127.0.0.1:19690. Modes:
//   page:   sendfile(2) from the buffered descriptor (page cache filled by the read)
//   direct: pread(O_DIRECT) 1 MiB into an aligned buffer, then write(2) to the socket
//   splice: splice(O_DIRECT fd -> pipe of 1 MiB), splice(pipe -> socket)
//   page12: sendfile of 256 KiB blocks by 12 interleaved streams (12 partitions' consumer)
//   page12ra: the same, with the next 8 MiB paged in (sendfile to /dev/null) ahead
// A child process drains the socket; the parent's CPU (getrusage) is reported.
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#define CHUNK (1 << 20)
static double now(void){struct timeval t;gettimeofday(&t,0);return t.tv_sec+t.tv_usec/1e6;}
static double cpu(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
int main(int argc,char**argv){
  const char*path=argv[1];const char*mode=argv[2];
  int lfd=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={.sin_family=AF_INET,.sin_port=htons(19690),.sin_addr.s_addr=htonl(0x7f000001)};
  int one=1;setsockopt(lfd,SOL_SOCKET,SO_REUSEADDR,&one,4);
  if(bind(lfd,(void*)&a,sizeof a)||listen(lfd,1)){perror("bind");return 1;}
  pid_t c=fork();
  if(c==0){int s=socket(AF_INET,SOCK_STREAM,0);connect(s,(void*)&a,sizeof a);char*b=malloc(CHUNK);long t=0;ssize_t n;while((n=read(s,b,CHUNK))>0)t+=n;_exit(0);}
  int s=accept(lfd,0,0);
  int fd=open(path,O_RDONLY);int dfd=open(path,O_RDONLY|O_DIRECT);
  off_t len=lseek(fd,0,SEEK_END);posix_fadvise(fd,0,0,POSIX_FADV_DONTNEED);
  double c0=cpu(),t0=now();
  if(!strcmp(mode,"page")){off_t off=0;while(off<len){ssize_t n=sendfile(s,fd,&off,len-off);if(n<=0){perror("sendfile");break;}}}
  else if(!strncmp(mode,"page12",6)){
    // 12 streams over 256 KiB blocks (stream k owns blocks k, k+12, ...), each taking 4 blocks
    // per turn, as a consumer of 12 interleaved partitions; "page12ra": before a block past the
    // paged-in end, page in the next 8 MiB of the file in one sendfile to /dev/null.
    int ra=!strcmp(mode,"page12ra");int null=open("/dev/null",O_WRONLY);off_t paged=0;
    long blocks=len/(256<<10);long next[12];for(int k=0;k<12;k++)next[k]=k;int live=12;
    while(live){live=0;for(int k=0;k<12;k++){for(int i=0;i<4&&next[k]<blocks;i++){off_t off=next[k]*(256<<10);
      if(ra&&off+(256<<10)>paged){off_t from=paged>off?paged:off;off_t po=from;off_t end=from+(8<<20);if(end>len)end=len;while(po<end){if(sendfile(null,fd,&po,end-po)<=0)break;}paged=end;}
      off_t o=off;size_t n=256<<10;while(n>0){ssize_t w=sendfile(s,fd,&o,n);if(w<=0){perror("sendfile");return 1;}n-=w;}next[k]+=12;}
      if(next[k]<blocks)live=1;}}}
  else if(!strcmp(mode,"direct")){char*b;posix_memalign((void**)&b,4096,CHUNK);for(off_t off=0;off<len;off+=CHUNK){ssize_t n=pread(dfd,b,CHUNK,off);if(n<=0)break;char*p=b;while(n>0){ssize_t w=write(s,p,n);if(w<=0){perror("write");return 1;}p+=w;n-=w;}}}
  else if(!strcmp(mode,"splice")){int p[2];pipe(p);fcntl(p[1],F_SETPIPE_SZ,CHUNK);for(off_t off=0;off<len;){ssize_t n=splice(dfd,&off,p[1],0,CHUNK,SPLICE_F_MOVE);if(n<=0){perror("splice in");break;}while(n>0){ssize_t w=splice(p[0],0,s,0,n,SPLICE_F_MOVE);if(w<=0){perror("splice out");return 1;}n-=w;}}}
  double c1=cpu(),t1=now();
  shutdown(s,SHUT_WR);close(s);waitpid(c,0,0);
  double mb=len/1048576.0;
  printf("%-7s %.0f MiB: %.3f ms CPU/MB, %.0f MB/s\n",mode,mb,(c1-c0)*1000/mb,mb/(t1-t0));
  return 0;}
